//! The server over real TLS: first start, apply, validation, enrollment, long-polls,
//! authorization, first-boot Ignition, status reports and pool counts, rollouts, reboot slots
//! and garbage collection. Each test starts its own server in-process on 127.0.0.1:0.

mod common;

use common::*;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_creates_secrets_and_a_second_start_reuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let s = start(&state, options(5)).await;
    assert!(s.first_start);
    assert_eq!(s.new_bootstrap_tokens, ["master", "worker"]);
    for f in [
        "pki/ca.crt",
        "pki/ca.key",
        "pki/server.crt",
        "pki/server.key",
        "admin.token",
        "tokens/worker.token",
        "tokens/master.token",
        "hearth.redb",
    ] {
        let m = std::fs::metadata(state.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        if f != "hearth.redb" {
            assert_eq!(m.mode() & 0o777, 0o600, "{f}");
        }
    }
    for d in ["", "pki", "tokens"] {
        let m = std::fs::metadata(state.join(d)).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700, "{d}/");
    }
    let how = s.instructions("https://h:22623");
    assert!(
        how.contains("hearth login --server https://h:22623 --ca"),
        "{how}"
    );
    assert!(how.contains("/config/worker?token="), "{how}");
    assert!(
        !how.contains(&bootstrap_token(&s, "worker")),
        "no secrets in the instructions"
    );
    let api = Api::admin(&s);
    assert_eq!(api.get("/api/v1/pools").await.status, StatusCode::OK);
    let ca = std::fs::read(state.join("pki/ca.crt")).unwrap();
    let token = api.token.clone();
    let worker = bootstrap_token(&s, "worker");
    s.shutdown().await;

    let s = start(&state, options(5)).await;
    assert!(!s.first_start);
    assert!(s.new_bootstrap_tokens.is_empty());
    assert_eq!(std::fs::read(state.join("pki/ca.crt")).unwrap(), ca);
    let api = Api::admin(&s);
    assert_eq!(api.token, token);
    assert_eq!(api.get("/api/v1/pools").await.status, StatusCode::OK);
    assert_eq!(bootstrap_token(&s, "worker"), worker);
    api.enroll(&worker, "w0", json!({})).await;
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_the_example_fleet_renders_every_pool() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let a = api.apply(&example_files()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let results = a.json["results"].as_array().unwrap();
    assert!(
        results
            .iter()
            .all(|r| r["action"] == "created" || r["action"] == "configured"),
        "{results:?}"
    );
    assert!(results.iter().any(|r| r["kind"] == "MachineConfiguration"));
    // Pools: worker and infra rendered, nodes counted.
    let worker = pool(&api, "worker").await;
    let target = worker["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(target.starts_with("rendered-worker-"), "{worker}");
    assert_eq!(counts(&api, "worker").await, (2, 0, 0, 0));
    assert_eq!(counts(&api, "infra").await, (1, 0, 0, 0));
    let infra = pool(&api, "infra").await;
    assert_eq!(infra["spec"]["maxUnavailable"], "50%");
    // worker-1 has its own render (a per-node overlay).
    let n = api.get("/api/v1/nodes/worker-1").await.json;
    assert!(
        n["status"]["desired"]
            .as_str()
            .unwrap()
            .starts_with("rendered-worker-worker-1-"),
        "{n}"
    );
    // Applying again changes nothing.
    let a = api.apply(&example_files()).await;
    assert!(
        a.json["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["action"] == "unchanged"),
        "{}",
        a.text
    );
    // The configs come back in the version they were written in.
    let mc = api
        .get("/api/v1/machineconfigs/80-worker-1-static-ip")
        .await
        .json;
    assert_eq!(mc["spec"]["config"]["ignition"]["version"], "3.4.0");
    assert!(mc["metadata"]["creationTimestamp"].is_string());
    // Rendered configs are listed and readable.
    let r = api.get(&format!("/api/v1/renderedconfigs/{target}")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.json["metadata"]["annotations"]["hearth.io/rendered-from"].is_string());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mco_corpus_is_applied_or_refused_with_precise_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let corpus = shared().join("corpus/mco-e2e");
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut good = Vec::new();
    let mut refused = 0;
    for p in files {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&p).unwrap();
        let (_, diags) = hearth_config::manifest::read_str(&name, &text);
        if diags.iter().any(|d| d.is_error()) {
            let before = s.app.snapshot().revision;
            let a = api.apply_text(&name, &text).await;
            assert_eq!(
                a.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{name}: {}",
                a.text
            );
            let d = &a.json["diagnostics"];
            let err = d
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["severity"] == "error")
                .unwrap_or_else(|| panic!("{name}: {d}"));
            assert_eq!(err["file"], name.as_str());
            assert!(err["line"].as_u64().is_some(), "{name}: {err}");
            assert!(!err["message"].as_str().unwrap().is_empty());
            assert_eq!(s.app.snapshot().revision, before, "{name}: nothing stored");
            refused += 1;
        } else {
            good.push((name, text));
        }
    }
    assert!(refused >= 3, "the corpus has refused manifests");
    let a = api.apply(&good).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    // Every pool either has a target or says why not.
    let pools = api.get("/api/v1/pools").await.json;
    for p in pools["items"].as_array().unwrap() {
        let target = &p["spec"]["configuration"]["name"];
        let render = p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "RenderDegraded")
            .unwrap();
        assert!(target.is_string() || render["status"] == "True", "{}", p);
    }
    let worker = pool(&api, "worker").await;
    assert!(worker["spec"]["configuration"]["name"].is_string());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_manifests_are_refused_whole_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    let good = worker_mc("10-good", "ok");
    let bad = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 20-bad\nspec:\n  kernelType: rt\n";
    let before = s.app.snapshot().revision;
    let a = api
        .apply(&[
            ("good.yaml".into(), good.clone()),
            ("bad.yaml".into(), bad.into()),
        ])
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    let d = &a.json["diagnostics"][0];
    assert_eq!(d["file"], "bad.yaml");
    assert_eq!(d["line"], 6);
    assert_eq!(d["path"], "spec.kernelType");
    assert_eq!(d["object"], "MachineConfig/20-bad");
    assert_eq!(a.json["reason"], "Invalid");
    // Nothing was stored, not even the good one.
    assert_eq!(s.app.snapshot().revision, before);
    assert_eq!(
        api.get("/api/v1/machineconfigs/10-good").await.status,
        StatusCode::NOT_FOUND
    );
    // Raw YAML works too (Content-Type other than the envelope).
    let a = api
        .send(
            api.client
                .post(format!("{}/api/v1/manifests?file=raw.yaml", api.base))
                .bearer_auth(&api.token)
                .header("content-type", "application/yaml")
                .body("kind: [\n"),
        )
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(a.json["diagnostics"][0]["file"], "raw.yaml");
    // A duplicate within one apply.
    let a = api
        .apply(&[
            ("a.yaml".into(), good.clone()),
            ("b.yaml".into(), good.clone()),
        ])
        .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(a.text.contains("given twice"), "{}", a.text);
    // A dry run stores nothing.
    let a = api
        .send(
            api.client
                .post(format!(
                    "{}/api/v1/manifests?file=g.yaml&dryRun=true",
                    api.base
                ))
                .bearer_auth(&api.token)
                .body(good.clone()),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json["results"][0]["action"], "created");
    assert_eq!(s.app.snapshot().revision, before);
    s.shutdown().await;
}

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

    // Unchanged: 304 after `wait`.
    let t = Instant::now();
    let a = node
        .get(&format!("/api/v1/agent/desired?known={first}&wait=1"))
        .await;
    assert_eq!(a.status, StatusCode::NOT_MODIFIED);
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(3),
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
        let (m, d) = hearth_config::manifest::read_str("served", &wrapped.to_string());
        assert!(!d.iter().any(|d| d.is_error()), "{v}: {d:?}");
        assert_eq!(m.machine_configs.len(), 1);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_drive_nodes_and_pool_counts() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(api.enroll(&token, &format!("w{i}"), json!({})).await);
    }
    assert_eq!(counts(&api, "worker").await, (3, 0, 0, 0));
    let first = nodes[0].desired_name().await.unwrap();
    for n in &nodes {
        n.report("Done", Some(&first), Some(&first), None).await;
    }
    assert_eq!(counts(&api, "worker").await, (3, 3, 3, 0));
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["configuration"]["name"], first.as_str());
    let cond = |p: &Value, t: &str| {
        p["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()["status"]
            .clone()
    };
    assert_eq!(cond(&p, "Updated"), "True");
    assert_eq!(cond(&p, "Updating"), "False");

    // A change rolls out one node at a time (maxUnavailable 1).
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let desired: Vec<Option<String>> = {
        let mut v = Vec::new();
        for n in &nodes {
            v.push(n.desired_name().await);
        }
        v
    };
    assert_eq!(
        desired,
        vec![
            Some(second.clone()),
            Some(first.clone()),
            Some(first.clone())
        ]
    );
    let p = pool(&api, "worker").await;
    assert_eq!(cond(&p, "Updating"), "True");
    assert_eq!(cond(&p, "Updated"), "False");

    // w0 fails: Degraded, with the failing step and object.
    nodes[0]
        .report(
            "Degraded",
            Some(&first),
            Some(&second),
            Some("step 2 of 5 (write file /etc/hearth-test-10-a): permission denied"),
        )
        .await;
    // As in the MCO, updated (and ready) count nodes in the pool's target config: none yet.
    assert_eq!(counts(&api, "worker").await, (3, 0, 0, 1));
    let n = api.get("/api/v1/nodes/w0").await.json;
    assert_eq!(n["status"]["state"], "Degraded");
    assert!(n["status"]["reason"]
        .as_str()
        .unwrap()
        .contains("/etc/hearth-test-10-a"));
    let p = pool(&api, "worker").await;
    assert_eq!(cond(&p, "Degraded"), "True");
    assert_eq!(cond(&p, "NodeDegraded"), "True");
    // Nobody else moves while w0 is unavailable.
    assert_eq!(nodes[1].desired_name().await, Some(first.clone()));
    let ev = api.get("/api/v1/events?object=Node/w0").await.json;
    assert!(
        ev["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "Degraded"),
        "{ev}"
    );

    // w0 recovers; w1 goes next, then w2.
    nodes[0]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[1].desired_name().await, Some(second.clone()));
    assert_eq!(nodes[2].desired_name().await, Some(first.clone()));
    nodes[1]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    nodes[2]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(second.clone()));
    nodes[2]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(counts(&api, "worker").await, (3, 3, 3, 0));
    assert_eq!(
        pool(&api, "worker").await["status"]["configuration"]["name"],
        second.as_str()
    );

    // Pause: nothing moves; resume: it goes on.
    assert_eq!(
        api.post("/api/v1/pools/worker/pause", &json!({}))
            .await
            .status,
        StatusCode::OK
    );
    api.apply_text("mc.yaml", &worker_mc("10-a", "three")).await;
    assert_eq!(nodes[0].desired_name().await, Some(second.clone()));
    let p = pool(&api, "worker").await;
    assert_eq!(p["spec"]["paused"], true);
    assert_eq!(cond(&p, "Updating"), "False");
    api.post("/api/v1/pools/worker/resume", &json!({})).await;
    assert_ne!(nodes[0].desired_name().await, Some(second.clone()));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_move_nodes_between_pools() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"set": {"node-role.kubernetes.io/infra": ""}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let n = api.get("/api/v1/nodes/worker-0").await.json;
    assert_eq!(n["status"]["pool"], "infra");
    assert!(n["status"]["desired"]
        .as_str()
        .unwrap()
        .starts_with("rendered-infra-"));
    // Changing a label's value needs overwrite.
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"set": {"node-role.kubernetes.io/infra": "x"}}),
        )
        .await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    let a = api
        .post(
            "/api/v1/nodes/worker-0/labels",
            &json!({"remove": ["node-role.kubernetes.io/infra"]}),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        api.get("/api/v1/nodes/worker-0").await.json["status"]["pool"],
        "worker"
    );
    assert_eq!(
        api.post("/api/v1/nodes/nope/labels", &json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_slots_follow_max_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let a = api.enroll(&token, "w0", json!({})).await;
    let b = api.enroll(&token, "w1", json!({})).await;
    let acquire = json!({"action": "acquire"});
    let r = a.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(
        r.json,
        json!({"granted": true, "retryAfterSeconds": 0}),
        "{}",
        r.text
    );
    // Asking again while holding it is granted (idempotent).
    assert_eq!(
        a.post("/api/v1/agent/reboot-slot", &acquire).await.json["granted"],
        true
    );
    let r = b.post("/api/v1/agent/reboot-slot", &acquire).await;
    assert_eq!(r.json["granted"], false);
    assert!(r.json["retryAfterSeconds"].as_u64().unwrap() > 0);
    let r = a
        .post("/api/v1/agent/reboot-slot", &json!({"action": "release"}))
        .await;
    assert_eq!(r.json["granted"], false);
    assert_eq!(
        b.post("/api/v1/agent/reboot-slot", &acquire).await.json["granted"],
        true
    );
    // Reaching the desired config in Done gives the slot back.
    let d = b.desired_name().await.unwrap();
    b.report("Done", Some(&d), Some(&d), None).await;
    assert_eq!(
        a.post("/api/v1/agent/reboot-slot", &acquire).await.json["granted"],
        true
    );
    assert_eq!(
        api.get("/api/v1/nodes/w1").await.json["status"]["rebootSlot"],
        Value::Null
    );
    assert_eq!(
        a.post("/api/v1/agent/reboot-slot", &json!({"action": "reboot"}))
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_configs_in_use_are_never_collected() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(1)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "v0")).await;
    let token = bootstrap_token(&s, "worker");
    let stuck = api.enroll(&token, "stuck", json!({})).await;
    let first = stuck.desired_name().await.unwrap();
    // The node says it is in the first config, and never gets anywhere else.
    stuck.report("Done", Some(&first), Some(&first), None).await;
    let mut names = vec![first.clone()];
    for i in 1..5 {
        api.apply_text("mc.yaml", &worker_mc("10-a", &format!("v{i}")))
            .await;
        let t = pool(&api, "worker").await["spec"]["configuration"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        names.push(t);
        stuck
            .report(
                "Working",
                Some(&first),
                stuck.desired_name().await.as_deref(),
                None,
            )
            .await;
    }
    let rendered = api.get("/api/v1/renderedconfigs").await.json;
    let kept: Vec<&str> = rendered["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    // The first (the node's current), the newest (target and desired) and nothing else.
    assert!(kept.contains(&first.as_str()), "{kept:?}");
    assert!(kept.contains(&names[4].as_str()), "{kept:?}");
    assert!(!kept.contains(&names[2].as_str()), "{kept:?}");
    assert_eq!(
        api.get(&format!("/api/v1/renderedconfigs/{first}"))
            .await
            .status,
        StatusCode::OK
    );
    // Rendered configs cannot be deleted by hand.
    assert_eq!(
        api.delete(&format!("/api/v1/machineconfigs/{first}"))
            .await
            .status,
        StatusCode::CONFLICT
    );
    let ev = api.get("/api/v1/events?object=RenderedConfigs").await.json;
    assert!(!ev["items"].as_array().unwrap().is_empty());
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_objects() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply(&example_files()).await;
    assert_eq!(
        api.delete("/api/v1/machineconfigs/50-examplecorp-chrony")
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        api.delete("/api/v1/machineconfigs/50-examplecorp-chrony")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    // A custom pool goes; its nodes fall back to worker.
    assert_eq!(
        api.delete("/api/v1/pools/infra").await.status,
        StatusCode::OK
    );
    assert_eq!(
        api.get("/api/v1/nodes/infra-0").await.json["status"]["pool"],
        "worker"
    );
    // A built-in pool goes back to its built-in definition, then cannot go further.
    let a = api.delete("/api/v1/pools/worker").await;
    assert_eq!(a.json["action"], "reset to its built-in definition");
    assert_eq!(
        api.delete("/api/v1/pools/worker").await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(api.get("/api/v1/pools/worker").await.status, StatusCode::OK);
    s.shutdown().await;
}

fn worker_pool(max_unavailable: u32, on_degraded: Option<&str>) -> String {
    let annotations = on_degraded
        .map(|v| format!("  annotations:\n    hearth.io/on-degraded: {v}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: worker\n{annotations}spec:\n  machineConfigSelector:\n    matchLabels:\n      machineconfiguration.openshift.io/role: worker\n  nodeSelector:\n    matchLabels:\n      node-role.kubernetes.io/worker: \"\"\n  maxUnavailable: {max_unavailable}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_node_halts_the_rollout() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("pool.yaml", &worker_pool(2, None)).await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..3 {
        let n = api.enroll(&token, &format!("w{i}"), json!({})).await;
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
        nodes.push(n);
    }
    let first = nodes[0].desired_name().await.unwrap();
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = nodes[0].desired_name().await.unwrap();
    assert_ne!(first, second);
    assert_eq!(
        nodes[1].desired_name().await,
        Some(second.clone()),
        "maxUnavailable 2"
    );
    assert_eq!(nodes[2].desired_name().await, Some(first.clone()));
    // w0 fails, w1 succeeds: one unavailable of 2 allowed, but the rollout halts.
    nodes[0]
        .report(
            "Degraded",
            Some(&first),
            Some(&second),
            Some("step 1 of 1 (write file /etc/x): EIO"),
        )
        .await;
    nodes[1]
        .report("Done", Some(&second), Some(&second), None)
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(first.clone()));
    let p = pool(&api, "worker").await;
    assert_eq!(p["status"]["rolloutHaltedBy"], "w0");
    let updating = p["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Updating")
        .unwrap()
        .clone();
    assert_eq!(updating["reason"], "Halted", "{updating}");
    // Told to continue, it goes on.
    api.apply_text("pool.yaml", &worker_pool(2, Some("continue")))
        .await;
    assert_eq!(nodes[2].desired_name().await, Some(second.clone()));
    assert_eq!(
        pool(&api, "worker").await["status"]["rolloutHaltedBy"],
        Value::Null
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiting_agents_all_wake_on_one_apply() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("pool.yaml", &worker_pool(100, None)).await;
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let mut nodes = Vec::new();
    for i in 0..60 {
        let n = api.enroll(&token, &format!("n{i:02}"), json!({})).await;
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
        nodes.push((n, d));
    }
    let mut waiters = Vec::new();
    for (n, d) in &nodes {
        let n = n.clone();
        let d = d.clone();
        waiters.push(tokio::spawn(async move {
            let a = n
                .get(&format!("/api/v1/agent/desired?known={d}&wait=60"))
                .await;
            (
                a.status,
                a.json["name"].as_str().map(str::to_string),
                Instant::now(),
            )
        }));
    }
    // Everyone is waiting.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = api.get("/metrics").await.text;
        if m.contains("hearth_server_long_polls_waiting 60") {
            break;
        }
        assert!(Instant::now() < deadline, "{m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = Instant::now();
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let mut slowest = Duration::ZERO;
    for w in waiters {
        let (status, name, when) = w.await.unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_ne!(name.as_deref(), Some(nodes[0].1.as_str()));
        slowest = slowest.max(when.duration_since(sent));
    }
    eprintln!("60 waiting agents all answered within {slowest:?} of the apply");
    assert!(slowest < Duration::from_secs(2), "{slowest:?}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleetlock_clients_share_the_reboot_slots() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), options(5)).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let a = api.enroll(&token, "w0", json!({})).await;
    let b = api.enroll(&token, "w1", json!({})).await;
    let body =
        |id: &str, group: &str| json!({"client_params": {"id": id, "group": group}}).to_string();
    // Zincati puts the credential into the URL: Basic auth.
    let fl = |who: &Api, path: &str, body: String| {
        api.client
            .post(format!("{}{path}", api.base))
            .basic_auth("node", Some(who.token.clone()))
            .header("fleet-lock-protocol", "true")
            .body(body)
    };
    let r = api
        .send(fl(&a, "/v1/pre-reboot", body("m0", "default")))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    // Taken: FleetLock's error document.
    let r = api
        .send(fl(&b, "/v1/pre-reboot", body("m1", "worker")))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert_eq!(r.json["kind"], "failed_lock");
    // The same slots as the agent API.
    let r = b
        .post("/api/v1/agent/reboot-slot", &json!({"action": "acquire"}))
        .await;
    assert_eq!(r.json["granted"], false);
    let r = api
        .send(fl(&a, "/v1/steady-state", body("m0", "default")))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = api
        .send(fl(&b, "/v1/pre-reboot", body("m1", "worker")))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // The protocol header, credentials and the group are checked.
    let r = api
        .send(
            api.client
                .post(format!("{}/v1/pre-reboot", api.base))
                .bearer_auth(&a.token)
                .body(body("m0", "default")),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["kind"], "missing_header");
    let r = api
        .send(
            api.client
                .post(format!("{}/v1/pre-reboot", api.base))
                .header("fleet-lock-protocol", "true")
                .body(body("m0", "default")),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = api
        .send(fl(&api, "/v1/pre-reboot", body("m0", "default")))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = api
        .send(fl(&a, "/v1/pre-reboot", body("m0", "infra")))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.json["kind"], "wrong_group");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_counts_as_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(5);
    o.stale_after = Duration::from_secs(1);
    o.tick = Duration::from_millis(200);
    let s = start(dir.path(), o).await;
    let api = Api::admin(&s);
    api.apply_text("mc.yaml", &worker_mc("10-a", "one")).await;
    let token = bootstrap_token(&s, "worker");
    let w0 = api.enroll(&token, "w0", json!({})).await;
    let w1 = api.enroll(&token, "w1", json!({})).await;
    let first = w0.desired_name().await.unwrap();
    for n in [&w0, &w1] {
        n.report("Done", Some(&first), Some(&first), None).await;
    }
    assert_eq!(counts(&api, "worker").await, (2, 2, 2, 0));
    // w1 goes quiet; w0 keeps talking. The server counts in whole seconds, so silence shows
    // between 1 and 2 s after w1's last word (plus a tick): wait for it, up to 10 s.
    let mut p = pool(&api, "worker").await;
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        w0.report("Done", Some(&first), Some(&first), None).await;
        p = pool(&api, "worker").await;
        if p["status"]["unavailableMachineCount"] == 1 {
            break;
        }
    }
    assert_eq!(p["status"]["unavailableMachineCount"], 1, "{p}");
    assert_eq!(p["status"]["readyMachineCount"], 1, "{p}");
    assert_eq!(
        api.get("/api/v1/nodes/w1").await.json["status"]["ready"],
        false
    );
    // A change: the silent node takes the only slot (and gets the config for when it is back);
    // w0 waits.
    api.apply_text("mc.yaml", &worker_mc("10-a", "two")).await;
    let second = pool(&api, "worker").await["spec"]["configuration"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(w0.desired_name().await, Some(first.clone()));
    // w1 is back and updates; then w0 goes.
    assert_eq!(w1.desired_name().await, Some(second.clone()));
    w1.report("Done", Some(&second), Some(&second), None).await;
    assert_eq!(w0.desired_name().await, Some(second.clone()));
    s.shutdown().await;
}

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
            "Sat 02:00-06:00 Europe/Berlin",
            "named time zones are not supported",
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
        let n = api.enroll(&token, &format!("w{i}"), json!({})).await;
        let d = n.desired_name().await.unwrap();
        n.report("Done", Some(&d), Some(&d), None).await;
        nodes.push(n);
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
        .send(
            api.client
                .post(format!("{}/v1/pre-reboot", api.base))
                .basic_auth("node", Some(nodes[1].token.clone()))
                .header("fleet-lock-protocol", "true")
                .body(json!({"client_params": {"id": "m1", "group": "worker"}}).to_string()),
        )
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
